"""Namespaces by name: what a caller may see (:mod:`.namespaces`) and the children peers serve (:mod:`.children`)."""
