"""Choosing each kernel's configuration on the GPU it runs on (choose), the choices kept on disk per GPU
and kernel version (cache), and the choices shipped per GPU model (defaults/)."""
