; Declarations of C++. A function's name (maybe qualified) is found inside its @declarator.
(function_definition declarator: (_) @declarator) @decl.function
(class_specifier name: (type_identifier) @name body: (field_declaration_list)) @decl.class
(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @decl.struct
(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @decl.struct
(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @decl.enum
(namespace_definition name: [(namespace_identifier) (nested_namespace_specifier)] @name) @decl.module
(field_declaration_list (field_declaration declarator: (function_declarator) @declarator) @decl.method)
(field_declaration_list (declaration declarator: (function_declarator) @declarator) @decl.method)
(type_definition declarator: (type_identifier) @name) @decl.type
(alias_declaration name: (type_identifier) @name) @decl.type
(preproc_function_def name: (identifier) @name) @decl.macro
(preproc_def name: (identifier) @name) @decl.constant
