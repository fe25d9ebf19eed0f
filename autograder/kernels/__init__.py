"""Student kernels: the bubblewrap sandbox, its limits and its start-up check."""
