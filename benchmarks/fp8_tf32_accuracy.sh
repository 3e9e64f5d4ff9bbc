#!/usr/bin/env bash
# fp8 and tf32 through this GPU's matrix units against the float64 reference: the metrics of
# each direction x type x accumulation mode (docs/fp8-tf32-h100.md). Needs a GPU.
#   bash benchmarks/fp8_tf32_accuracy.sh > accuracy.log
export PYTHONPATH=$PWD/tools:$PYTHONPATH
L="-fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -batchsize=4 -in_channels=64 -out_channels=64 -in_h=28 -in_w=28 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1 -pv -rand 1"
i=0
run() { i=$((i+1)); echo "== $*"; python3 -m convgen "$@" --json /tmp/d$i.json -print-verify-results always 2>&1 | grep -E "^# RMS|^\[|error|maxEps" ; python3 -c "
import json; j=json.load(open('/tmp/d$i.json')); mv=j.get('max_val') or j.get('histograms',{}).get('max_val')
print('   rms', j['rms'], 'abs', j['max_abs_diff'], 'eps', j['max_epsilon_diff'], 'th', j['thresholds'])" 2>&1 | tail -1; }
for t in fp8_e4m3 fp8_e5m2; do
  for op in conv2d conv2d_bwd_data conv2d_bwd_weight; do
    run --operation $op -t $t $L -x2
    run --operation $op -t $t $L -x2 -perf_config max_num_imprecise_acc=0
    run --operation $op -t $t $L -x2 -perf_config max_num_imprecise_acc=32
    run --operation $op -t $t $L -x2=0
  done
done
run --operation conv2d -t f32 $L -x2 -input_precision tf32
run --operation conv2d -t f32 $L -x2 -input_precision tf32 -print-verify-results always
run --operation conv2d_bwd_data -t f32 $L -x2 -input_precision tf32
run --operation conv2d -t f16 $L -x2
