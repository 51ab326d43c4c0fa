; Declarations of C. A function's name is found inside its @declarator.
(function_definition declarator: (_) @declarator) @decl.function
(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @decl.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @decl.struct
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @decl.enum
(type_definition declarator: (type_identifier) @name) @decl.type
(preproc_function_def name: (identifier) @name) @decl.macro
(preproc_def name: (identifier) @name) @decl.constant
