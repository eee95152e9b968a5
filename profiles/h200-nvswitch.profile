# H200 + NVSwitch, 8 per node (DGX H200 / HGX H200 layout), 400 Gb/s NDR
# InfiniBand per GPU between nodes.
#
# Sources. NVIDIA H200 datasheet (SXM, 141 GB): 989 TFLOP/s fp16/bf16
# tensor (dense; 1979 is with sparsity), 4.8 TB/s HBM3e, 141 GB, NVLink
# 900 GB/s per GPU (450 GB/s per direction). The fp16 rate without tensor
# cores is the H100 SXM5 whitepaper figure (same GH100 compute). DGX H200
# datasheet: 8 x 400 Gb/s ConnectX-7 (NDR, 50 GB/s per direction).
# "nominal" marks estimates: GEMM efficiency, overheads, all alphas, and
# betas taken as a fraction of the line rates. Collective betas are ring
# bus bandwidths (docs/cost-model.md).

name h200-nvswitch
description NVIDIA H200 SXM 141GB, 8 per node over NVSwitch, 400 Gb/s NDR InfiniBand per GPU
devices_per_node 8
peak_tflops 989           # datasheet, tensor cores, dense fp16/bf16
vector_tflops 133.8       # H100 SXM5 whitepaper (same compute)
mem_bandwidth_GBps 4800   # datasheet, HBM3e
mem_capacity_GB 141       # datasheet
gemm_eff_max 0.75         # nominal: more bandwidth than H100 for the same FLOP/s
gemm_half_dim 256         # nominal
kernel_overhead_us 3      # nominal

#    class kind            alpha_us       beta_GBps
# intra: NVSwitch, 450 GB/s per direction (datasheet); ~80% of it (nominal).
link intra p2p            alpha_us 8        beta_GBps 370
link intra allreduce      alpha_us 15       beta_GBps 360
link intra reduce_scatter alpha_us 12       beta_GBps 360
link intra allgather      alpha_us 12       beta_GBps 360
# inter: one NDR port per GPU, 50 GB/s line rate; ~90% of it (nominal).
link inter p2p            alpha_us 10       beta_GBps 45
link inter allreduce      alpha_us 35       beta_GBps 44
link inter reduce_scatter alpha_us 25       beta_GBps 44
link inter allgather      alpha_us 25       beta_GBps 44
