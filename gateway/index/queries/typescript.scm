; Declarations of TypeScript (and TSX). Where one node matches several patterns the first wins.
(function_declaration name: (identifier) @name) @decl.function
(generator_function_declaration name: (identifier) @name) @decl.function
(function_signature name: (identifier) @name) @decl.function
(class_declaration name: (type_identifier) @name) @decl.class
(abstract_class_declaration name: (type_identifier) @name) @decl.class
(interface_declaration name: (type_identifier) @name) @decl.interface
(type_alias_declaration name: (type_identifier) @name) @decl.type
(enum_declaration name: (identifier) @name) @decl.enum
(internal_module name: [(identifier) (nested_identifier)] @name) @decl.module
(module name: [(identifier) (nested_identifier)] @name) @decl.module
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @decl.method
(method_signature name: [(property_identifier) (private_property_identifier)] @name) @decl.method
(abstract_method_signature name: [(property_identifier) (private_property_identifier)] @name) @decl.method
(public_field_definition name: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression)]) @decl.method
(lexical_declaration (variable_declarator name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)])) @decl.function
(variable_declaration (variable_declarator name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)])) @decl.function
(lexical_declaration (variable_declarator name: (identifier) @name value: (class))) @decl.class
(program (lexical_declaration (variable_declarator name: (identifier) @name)) @decl.variable)
(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @name)) @decl.variable))
(program (variable_declaration (variable_declarator name: (identifier) @name)) @decl.variable)
(program (ambient_declaration (function_signature name: (identifier) @name)) @decl.function)
