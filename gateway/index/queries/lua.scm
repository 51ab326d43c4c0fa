; Declarations of Lua (``function M.f`` is qualified by M).
(function_declaration name: [(identifier) (dot_index_expression) (method_index_expression)] @name) @decl.function
