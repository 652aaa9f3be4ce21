"""The field's compressors on the kit (:mod:`commbench.methods.kit`), one module per paper: what the
literature compares against, registered under GRACE's names where GRACE has them (docs/methods.md)."""
