# train-predictor reads the training split of a NeuSight-style folder, and the
# weights a tensor-core-only training writes are usable by themselves.
# -DTESSERA, -DWORKDIR, -DGEMMS (tests/data/h100/gemm.csv).
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
file(REMOVE_RECURSE ${WORKDIR})
# The dataset root is above/neusight, as ../shared/data/neusight.
set(root ${WORKDIR}/above/neusight)
file(MAKE_DIRECTORY ${root}/device_configs ${root}/kernels/train/linear ${root}/kernels/test/linear)
file(WRITE ${root}/device_configs/g.json
     [[{"Device":"Test GPU","Dev_Mem":16,"Mem_Bw":900,"Num_Sm":80,"Core_Per_SM":64,"Freq":1380,"SingleFLOPs":14000,"L2Cache":6}]])
# 12 training rows and 5 held-out test rows of one GPU.
set(train "OPName,Latency,Device,B,M,N,K\n")
foreach(i RANGE 1 12)
  math(EXPR m "64 * ${i}")
  math(EXPR us "20 + 7 * ${i}")
  string(APPEND train "linear,0.0${us},Test GPU,1,${m},1024,1024\n")
endforeach()
file(WRITE ${root}/kernels/train/linear/g.csv "${train}")
set(test "OPName,Latency,Device,B,M,N,K\n")
foreach(i RANGE 1 5)
  math(EXPR m "96 * ${i}")
  string(APPEND test "linear,0.05${i},Test GPU,1,${m},512,1024\n")
endforeach()
file(WRITE ${root}/kernels/test/linear/g.csv "${test}")

# The folder above the datasets, the dataset root and its kernels/ folder:
# the 12 training rows, never the 5 held-out ones.
foreach(data above above/neusight above/neusight/kernels)
  tessera_ok(out train-predictor --data ${WORKDIR}/${data} --out ${WORKDIR}/w --only linreg)
  if(NOT out MATCHES "read 12 measurements on 1 GPUs from [^\n]*neusight/kernels/train\n")
    message(FATAL_ERROR "--data ${data}: expected the 12 rows of kernels/train, got:\n${out}")
  endif()
endforeach()
# validate kernels on the same folders: the 5 test rows.
foreach(data above above/neusight/kernels)
  tessera_ok(out validate kernels --data ${WORKDIR}/${data} --predictor linreg --weights ${WORKDIR}/w)
  if(NOT out MATCHES "linear +5 ")
    message(FATAL_ERROR "validate kernels --data ${data}: expected the 5 test rows, got:\n${out}")
  endif()
endforeach()

# Weights of the tensor-core model alone, used by the commands that take
# --weights (the FP32 tile-mlp then stays the built-in one).
tessera_ok(out train-predictor --only tensor-core --gemms ${GEMMS} --device H100-SXM --out ${WORKDIR}/tc)
if(EXISTS ${WORKDIR}/tc/tile_mlp.txt OR NOT EXISTS ${WORKDIR}/tc/tensor_core.txt)
  message(FATAL_ERROR "--only tensor-core: expected tensor_core.txt alone in --out")
endif()
tessera_ok(out validate kernels --data ${GEMMS} --device H100-SXM --weights ${WORKDIR}/tc)
if(NOT out MATCHES "\nall +1524 " OR NOT out MATCHES "on H100-SXM, the weights in ${WORKDIR}/tc: GPU time")
  message(FATAL_ERROR "validate kernels --weights (tensor-core only): expected the 1524 rows and the "
                      "weights named in the footer, got:\n${out}")
endif()
tessera_ok(out validate kernels --data ${GEMMS} --device H100-SXM --weights ${WORKDIR}/tc --json)
if(NOT out MATCHES "\"weights\": \"${WORKDIR}/tc\"")
  message(FATAL_ERROR "validate kernels --weights --json: no weights key, got:\n${out}")
endif()
file(WRITE ${WORKDIR}/k.csv "OPName,dtype,B,M,N,K\nlinear,bf16,1,4096,4096,4096\nlinear,fp32,1,4096,4096,4096\n")
tessera_ok(with predict-kernels --device H100-SXM --input ${WORKDIR}/k.csv --output ${WORKDIR}/with.csv
           --weights ${WORKDIR}/tc)
tessera_ok(without predict-kernels --device H100-SXM --input ${WORKDIR}/k.csv --output ${WORKDIR}/without.csv)
file(STRINGS ${WORKDIR}/with.csv with_rows)
file(STRINGS ${WORKDIR}/without.csv without_rows)
list(GET with_rows 2 with_fp32)
list(GET without_rows 2 without_fp32)
if(NOT with_fp32 STREQUAL without_fp32)
  message(FATAL_ERROR "the FP32 row should use the built-in tile-mlp: '${with_fp32}' vs '${without_fp32}'")
endif()
