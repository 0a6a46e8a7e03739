"""Writing bundles out: a reviewable tree of files, or one YAML stream."""
