; Declarations of PHP.
(class_declaration name: (name) @name) @decl.class
(interface_declaration name: (name) @name) @decl.interface
(trait_declaration name: (name) @name) @decl.trait
(enum_declaration name: (name) @name) @decl.enum
(function_definition name: (name) @name) @decl.function
(method_declaration name: (name) @name) @decl.method
