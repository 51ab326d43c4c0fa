; Declarations of Go. @receiver names a method's receiver type.
(function_declaration name: (identifier) @name) @decl.function
(method_declaration
  receiver: (parameter_list (parameter_declaration type: [
    (type_identifier) @receiver
    (pointer_type (type_identifier) @receiver)
    (generic_type type: (type_identifier) @receiver)
    (pointer_type (generic_type type: (type_identifier) @receiver))]))
  name: (field_identifier) @name) @decl.method
(type_spec name: (type_identifier) @name type: (struct_type)) @decl.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @decl.interface
(type_spec name: (type_identifier) @name) @decl.type
(type_alias name: (type_identifier) @name) @decl.type
(method_elem name: (field_identifier) @name) @decl.method
(source_file (const_declaration (const_spec name: (identifier) @name) @decl.constant))
(source_file (var_declaration (var_spec name: (identifier) @name) @decl.variable))
(source_file (var_declaration (var_spec_list (var_spec name: (identifier) @name) @decl.variable)))
