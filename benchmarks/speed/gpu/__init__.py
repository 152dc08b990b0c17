"""The measurements run on a lent GPU machine: `engine_speed_gpu` (gpu_device_run.sh),
`serve_gpu` (gpu_serve_run.sh), and `gpu_wheels` (the packages that machine lacks)."""
