"""The reference on real CUDA: ``device.CudaDevice`` (PyTorch streams, events, CUDA graphs with in-graph external
event records), ``replay`` (the corpus on the GPU), ``litmus`` (R1-R8 on the GPU), ``bench`` (fine vs coarse fence
timings). ``plan`` is the CPU-side logic (delays, observations, manifestation counts) and needs no torch."""
