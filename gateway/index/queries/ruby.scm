; Declarations of Ruby.
(class name: [(constant) (scope_resolution)] @name) @decl.class
(module name: [(constant) (scope_resolution)] @name) @decl.module
(method name: (_) @name) @decl.function
(singleton_method name: (_) @name) @decl.function
