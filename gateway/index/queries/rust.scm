; Declarations of Rust. An impl block is named by its type.
(function_item name: (identifier) @name) @decl.function
(function_signature_item name: (identifier) @name) @decl.function
(struct_item name: (type_identifier) @name) @decl.struct
(union_item name: (type_identifier) @name) @decl.struct
(enum_item name: (type_identifier) @name) @decl.enum
(trait_item name: (type_identifier) @name) @decl.trait
(impl_item type: [
  (type_identifier) @name
  (generic_type type: (type_identifier) @name)
  (scoped_type_identifier name: (type_identifier) @name)
  (generic_type type: (scoped_type_identifier name: (type_identifier) @name))
  (reference_type type: (type_identifier) @name)]) @decl.impl
(type_item name: (type_identifier) @name) @decl.type
(const_item name: (identifier) @name) @decl.constant
(static_item name: (identifier) @name) @decl.constant
(mod_item name: (identifier) @name body: (declaration_list)) @decl.module  ; `mod x;` is in x.rs
(macro_definition name: (identifier) @name) @decl.macro
