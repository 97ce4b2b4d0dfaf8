"""Storage building blocks: the fio wrapper."""
