"""Student kernels: the bubblewrap sandbox, its limits, its start-up check and the warm zygote."""
