"""The release core: the release description (spec), the steps every release goes through, shared metrics."""
