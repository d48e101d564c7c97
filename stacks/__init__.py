"""Pulumi stack programs: a typed config in, a whole stack of components out."""
