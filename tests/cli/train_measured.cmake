# The tensor-core model trained on kernels measured on one GPU
# (train-predictor --gemms FILE --device GPU) and cross-validated by shape on
# them (validate kernels --data FILE --device GPU --kfold N): both run, write
# or print what they say, and the trained weights predict their own training
# GEMMs closely (a fit on 1,524 rows at 200 epochs: in-sample MAPE under 6%,
# 3.2% measured).
include(${CMAKE_CURRENT_LIST_DIR}/helpers.cmake)
set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/train_measured_weights)
file(REMOVE_RECURSE ${out_dir})
# The other predictors' weights as shipped (the vector ops need the tile-mlp's).
file(GLOB shipped ${WEIGHTS}/*.txt)
file(COPY ${shipped} DESTINATION ${out_dir})
tessera_ok(out train-predictor --only tensor-core --gemms ${DATA}/gemm.csv --device H100-SXM --out ${out_dir}
           --epochs 200)
message("${out}")
if(NOT out MATCHES "read 1524 GEMM measurements from .*gemm.csv" OR NOT EXISTS ${out_dir}/tensor_core.txt)
  message(FATAL_ERROR "train-predictor did not read the 1,524 GEMMs or write tensor_core.txt")
endif()
tessera_ok(out validate kernels --data ${DATA}/gemm.csv --device H100-SXM --weights ${out_dir})
message("${out}")
string(REGEX MATCH "\nall +1524 +([0-9.]+)%" m "${out}")
if(NOT m OR CMAKE_MATCH_1 GREATER 6.0)
  message(FATAL_ERROR "weights trained on the H100 GEMMs miss them by ${CMAKE_MATCH_1}% (limit 6%)")
endif()
tessera_ok(out validate kernels --data ${DATA}/xla_grid.csv --device H100-SXM --kfold 3 --epochs 100)
message("${out}")
if(NOT out MATCHES "3-fold cross-validation by shape .*\nbf16 +375 +[0-9.]+%.*\ntf32 +375 +[0-9.]+%")
  message(FATAL_ERROR "validate kernels --kfold with --device printed no per-dtype held-out table")
endif()
