; Declarations of C#.
(class_declaration name: (identifier) @name) @decl.class
(interface_declaration name: (identifier) @name) @decl.interface
(struct_declaration name: (identifier) @name) @decl.struct
(enum_declaration name: (identifier) @name) @decl.enum
(record_declaration name: (identifier) @name) @decl.class
(method_declaration name: (identifier) @name) @decl.method
(constructor_declaration name: (identifier) @name) @decl.method
(namespace_declaration name: [(identifier) (qualified_name)] @name) @decl.module
