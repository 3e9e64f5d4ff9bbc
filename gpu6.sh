#!/usr/bin/env bash
export PYTHONPATH=$PWD/tools:$PWD/.pydeps
start=$(date +%s)
timeout 105 python3 benchmarks/bench_conv.py --layers untuned --types f16 --tuning-db --json $OUT/untuned-f16.json > $OUT/untuned-f16.txt 2>&1
grep -a geomean $OUT/untuned-f16.txt
timeout $(( 215 - ($(date +%s) - start) )) python3 benchmarks/bench_conv.py --layers untuned --types bf16 --tuning-db --json $OUT/untuned-bf16.json > $OUT/untuned-bf16.txt 2>&1
grep -a geomean $OUT/untuned-bf16.txt
echo "end at $(( $(date +%s) - start ))"
