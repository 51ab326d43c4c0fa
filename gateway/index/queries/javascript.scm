; Declarations of JavaScript (and JSX). Where one node matches several patterns the first wins.
(function_declaration name: (identifier) @name) @decl.function
(generator_function_declaration name: (identifier) @name) @decl.function
(class_declaration name: (identifier) @name) @decl.class
(method_definition name: [(property_identifier) (private_property_identifier)] @name) @decl.method
(field_definition property: [(property_identifier) (private_property_identifier)] @name
  value: [(arrow_function) (function_expression)]) @decl.method
(lexical_declaration (variable_declarator name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)])) @decl.function
(variable_declaration (variable_declarator name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)])) @decl.function
(lexical_declaration (variable_declarator name: (identifier) @name value: (class))) @decl.class
(program (lexical_declaration (variable_declarator name: (identifier) @name)) @decl.variable)
(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @name)) @decl.variable))
(program (variable_declaration (variable_declarator name: (identifier) @name)) @decl.variable)
