; Declarations of Scala.
(class_definition name: (identifier) @name) @decl.class
(object_definition name: (identifier) @name) @decl.class
(trait_definition name: (identifier) @name) @decl.trait
(function_definition name: (identifier) @name) @decl.function
(function_declaration name: (identifier) @name) @decl.function
