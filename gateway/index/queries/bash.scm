; Declarations of shell scripts.
(function_definition name: (word) @name) @decl.function
