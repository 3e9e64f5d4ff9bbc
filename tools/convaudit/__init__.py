"""convaudit: audits that cross-compile the suite's kernels and read what the compiler made
(`isa`: instructions per path and target; `wgmma_hazard`: SASS of sm90 bwd_weight kernels).
They sit on top of the suite; convgen never imports this package."""
