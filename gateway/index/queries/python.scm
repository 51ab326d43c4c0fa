; Declarations of Python: @decl.KIND is the declaration, @name its name.
(class_definition name: (identifier) @name) @decl.class
(function_definition name: (identifier) @name) @decl.function
(module (expression_statement (assignment left: (identifier) @name)) @decl.variable)
(module (type_alias_statement (type (identifier) @name)) @decl.type)
