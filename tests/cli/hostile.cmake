# The hostile-input corpus (issue "Reliability under hostile and huge
# inputs"): every input kind a user can hand tessera, each case with its
# expected exit code and error line, and a check that a refused command
# leaves no output, no temporary and every input untouched
# (hostile_case.cmake). Files used by the cases are in hostile/.
set(HOSTILE_FILES ${CMAKE_CURRENT_SOURCE_DIR}/hostile)
set(HOSTILE_SCENARIO ${PROJECT_SOURCE_DIR}/scenarios/default.yaml)
set(hostile_count 0)

function(hostile)
  cmake_parse_arguments(H "MULTILINE" "NAME;RC;REGEX;STDOUT" "ARGS;ENV;SETUP" ${ARGN})
  add_test(NAME hostile.${H_NAME}
           COMMAND ${CMAKE_COMMAND} -DTESSERA=$<TARGET_FILE:tessera> -DSCENARIO=${HOSTILE_SCENARIO}
                   -DFILES_DIR=${HOSTILE_FILES} -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR}/hostile/${H_NAME}
                   -DRC=${H_RC} "-DREGEX=${H_REGEX}" "-DARGS=${H_ARGS}" "-DENVS=${H_ENV}" "-DSETUP=${H_SETUP}" "-DSTDOUT=${H_STDOUT}"
                   -DMULTILINE=${H_MULTILINE}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/hostile_case.cmake)
  math(EXPR n "${hostile_count} + 1")
  set(hostile_count ${n} PARENT_SCOPE)
endfunction()

# --- Scenario keys through --set: each bad value names its key. ---------------
# (an id for test names: the key with dots as underscores, and the value's tag)
function(hostile_set key tag value)
  string(REPLACE "." "\\." k "${key}")
  string(REPLACE "." "_" id "${key}")
  hostile(NAME set.${id}.${tag} RC 2 REGEX "^tessera: error: s\\.yaml \\(--set ${k}\\): ${k}: "
          ARGS run s.yaml --set "${key}=${value}")
  set(hostile_count ${hostile_count} PARENT_SCOPE)
endfunction()

# Counts held as int: range-checked before narrowing.
set(int32_keys cluster.nodes cluster.gpus_per_node cluster.fabric.hosts_per_leaf cluster.fabric.spines
    parallelism.dp parallelism.tp parallelism.pp parallelism.ep parallelism.virtual_stages collectives.chunks)
foreach(key IN LISTS int32_keys)
  hostile_set(${key} negative -1)
  hostile_set(${key} zero 0)
  hostile_set(${key} text abc)
  hostile_set(${key} fraction 2.5)
  hostile_set(${key} list "[1, 2]")
  hostile_set(${key} mapping "{a: 1}")
  hostile_set(${key} wraps_to_2 4294967298)
  hostile_set(${key} past_int64 99999999999999999999)
endforeach()
# Counts held as int64.
foreach(key IN ITEMS training.micro_batch training.seq_len training.global_batch model.layers model.moe.experts)
  hostile_set(${key} negative -8)
  hostile_set(${key} zero 0)
  hostile_set(${key} text eight)
  hostile_set(${key} exponent 1e999)
  hostile_set(${key} past_int64 99999999999999999999)
endforeach()
# Unit strings.
foreach(key IN ITEMS cluster.nvlink_bandwidth cluster.nic_bandwidth cluster.fabric.spine_bandwidth)
  hostile_set(${key} negative -400Gbps)
  hostile_set(${key} zero 0Gbps)
  hostile_set(${key} no_unit 400)
  hostile_set(${key} bad_unit 400Gbs)
  hostile_set(${key} huge 1e999Gbps)
  hostile_set(${key} list "[400Gbps]")
endforeach()
foreach(key IN ITEMS cluster.nvlink_latency cluster.nic_latency cluster.fabric.spine_latency calibration.host_microbatch)
  hostile_set(${key} negative -1us)
  hostile_set(${key} no_unit 1)
  hostile_set(${key} nan nanus)
  hostile_set(${key} past_int64_ps 9223373s)
  hostile_set(${key} fraction_ps 0.5ps)
endforeach()
hostile_set(parallelism.bucket_size negative -25MB)
hostile_set(parallelism.bucket_size huge 9EiB)
# Names from a fixed set.
foreach(key IN ITEMS training.dtype training.framework training.optimizer backend cluster.gpu model.preset
                     parallelism.grad_sync parallelism.schedule parallelism.recompute parallelism.layout predictor
                     cluster.fabric.type collectives.algorithm collectives.granularity)
  hostile_set(${key} unknown bogus)
  hostile_set(${key} list "[a, b]")
endforeach()
# FP8 training on a GPU without FP8 tensor cores: the dtype's key, the GPU named.
hostile(NAME wrong.fp8_on_a100 RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set training\.dtype\): training\.dtype: GPU 'A100-40GB' has no fp8 tensor cores]=]
        ARGS run s.yaml --set cluster.gpu=A100-40GB --set training.dtype=fp8)
foreach(key IN ITEMS parallelism.sequence_parallel parallelism.tp_comm_overlap training.grad_clipping)
  hostile_set(${key} not_bool maybe)
endforeach()
# The ns-3 backend's `ns3:` section (created by --set; checked whatever the
# backend): each bad value names its key and the range.
foreach(key IN ITEMS ns3.packets_per_segment ns3.num_vls)
  hostile_set(${key} negative -1)
  hostile_set(${key} zero 0)
  hostile_set(${key} text many)
  hostile_set(${key} fraction 1.5)
  hostile_set(${key} list "[1, 2]")
  hostile_set(${key} past_int64 99999999999999999999)
endforeach()
hostile(NAME ns3.packets_per_segment_range RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set ns3\.packets_per_segment\): ns3\.packets_per_segment: must be between 1 and 4096, got 4097$]=]
        ARGS run s.yaml --set ns3.packets_per_segment=4097)
hostile(NAME ns3.num_vls_range RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set ns3\.num_vls\): ns3\.num_vls: must be between 1 and 15, got 16$]=]
        ARGS run s.yaml --set ns3.num_vls=16)
foreach(mtu IN ITEMS 3000B 8KiB 0B 100)
  hostile_set(ns3.mtu ${mtu} ${mtu})
endforeach()
hostile(NAME ns3.mtu_not_ib RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set ns3\.mtu\): ns3\.mtu: an InfiniBand MTU is 256B, 512B, 1KiB, 2KiB or 4KiB, got 3000B$]=]
        ARGS run s.yaml --set ns3.mtu=3000B)
hostile_set(ns3.model unknown ethernet)
hostile_set(ns3.model list "[a, b]")
hostile_set(ns3.adaptive_routing not_bool maybe)
hostile_set(ns3.scale_up list "[flow]")
# collectives.algorithm per kind: unknown kind, an algorithm the kind lacks, a list.
hostile(NAME collectives.algorithm_unknown_kind RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set collectives\.algorithm\): collectives\.algorithm\.alltoall: unknown key, did you mean 'all-to-all'\? \(known here: all-gather, all-reduce, all-to-all, broadcast, reduce, reduce-scatter, send-recv\)$]=]
        ARGS run s.yaml --set "collectives.algorithm={alltoall: direct}")
hostile(NAME collectives.algorithm_kind_lacks_it RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set collectives\.algorithm\): collectives\.algorithm\.all-gather: all-gather has no algorithm 'tree' \(available: auto, ring, halving-doubling\)$]=]
        ARGS run s.yaml --set "collectives.algorithm={all-gather: tree}")
hostile(NAME collectives.algorithm_kind_unknown_name RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set collectives\.algorithm\): collectives\.algorithm\.all-reduce: ]=]
        ARGS run s.yaml --set "collectives.algorithm={all-reduce: fastest}")
hostile(NAME collectives.algorithm_kind_list RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set collectives\.algorithm\): collectives\.algorithm\.all-to-all: expected a single value]=]
        ARGS run s.yaml --set "collectives.algorithm={all-to-all: [direct]}")
hostile(NAME ns3.scale_up_unknown RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set ns3\.scale_up\): ns3\.scale_up: unknown scale-up model 'nvlink' \(expected flow or packets\)$]=]
        ARGS run s.yaml --set ns3.scale_up=nvlink)
hostile_set(ns3.buffer negative -1KiB)
hostile_set(ns3.buffer no_unit 4096)
hostile(NAME ns3.buffer_below_segment RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set ns3\.buffer\): ns3\.buffer: must be 0 \(auto\) or hold one segment's credits: ns3\.packets_per_segment x \(ns3\.mtu \+ 30 B of headers, in whole 64-byte blocks\) = 4 x 4160 = 16640 B, got 16KiB$]=]
        ARGS run s.yaml --set ns3.packets_per_segment=4 --set ns3.buffer=16KiB)
hostile(NAME ns3.unknown_key RC 2 REGEX [=[^tessera: error: s\.yaml \(--set ns3\.segment\): ns3\.segment: unknown key]=]
        ARGS run s.yaml --set ns3.segment=4)
hostile(NAME ns3.not_a_mapping RC 2 REGEX [=[^tessera: error: s\.yaml \(--set ns3\): ns3: must be a mapping$]=]
        ARGS run s.yaml --set ns3=4)
# Unknown keys at every level.
foreach(key IN ITEMS nodes cluster.node cluster.fabric.spnes training.recompute model.hidden_size parallelism.cp)
  string(REPLACE "." "_" id "${key}")
  hostile(NAME unknown_key.${id} RC 2 REGEX "unknown key" ARGS run s.yaml --set ${key}=1)
endforeach()
# Crashes and silent wrong answers of the report, now one-line errors.
hostile(NAME crash.tp_pp_overflow RC 2 REGEX [=[dp x tp x pp \(16 x 65536 x 65536 = 68719476736\)]=]
        ARGS run s.yaml --set parallelism.tp=65536 --set parallelism.pp=65536)
# (Only the used part of a fat-tree is built: one leaf, its pod's 1.5 M
# spines, no cores; it runs, where it crashed and later was refused.)
hostile(NAME crash.fat_tree_radix RC 0
        REGEX [=[Iteration +[0-9.]+ ms]=]
        ARGS run fat_tree.yaml --set cluster.fabric.k=3000000 --set cluster.fabric.tiers=3
             --set cluster.fabric.core_bandwidth=400Gbps --set cluster.fabric.core_latency=1us)
hostile(NAME wrong.micro_batch_time_overflow RC 2
        REGEX [=[^tessera: error: s\.yaml: training\.micro_batch, training\.seq_len, training\.global_batch, model\.hidden, model\.layers: one iteration .* cannot be simulated: time overflow]=]
        ARGS run s.yaml --set training.micro_batch=1000000000)
hostile(NAME wrong.nic_latency_times_two RC 2 REGEX [=[cluster\.nic_latency: time overflow: 9000000s x 2]=]
        ARGS run s.yaml --set cluster.nic_latency=9000000s)
hostile(NAME wrong.gpus_past_int RC 2 REGEX [=[65536 x 65536 = 4294967296 GPUs; at most 2147483647]=]
        ARGS run s.yaml --set cluster.nodes=65536 --set cluster.gpus_per_node=65536)

# --- Scenario files. ---------------------------------------------------------
foreach(case IN ITEMS
        "dup_top|^tessera: error: dup_top\\.yaml:2:1: name: duplicate key"
        "dup_nested|^tessera: error: dup_nested\\.yaml:[0-9]+:[0-9]+: cluster\\.nodes: duplicate key"
        "two_docs|^tessera: error: two_docs\\.yaml:[0-9]+:[0-9]+: a second YAML document"
        "complex_key|^tessera: error: complex_key\\.yaml:1:3: \\(top level\\): a key must be a plain name"
        "mapping_key_nested|^tessera: error: mapping_key_nested\\.yaml:[0-9]+:[0-9]+: cluster: a key must be a plain name"
        "empty|^tessera: error: empty\\.yaml: the scenario is empty"
        "comment_only|^tessera: error: comment_only\\.yaml: the scenario is empty"
        "list_top|^tessera: error: list_top\\.yaml.*must be a YAML mapping"
        "scalar_top|^tessera: error: scalar_top\\.yaml.*must be a YAML mapping"
        "binary|^tessera: error: binary\\.yaml"
        "deep|^tessera: error: deep\\.yaml"
        "tabs|^tessera: error: tabs\\.yaml:[0-9]+:[0-9]+: malformed YAML"
        "unterminated|^tessera: error: unterminated\\.yaml:6:7: name: the quoted value opened here does not close on its line"
        "anchor_loop|^tessera: error: anchor_loop\\.yaml"
        "yaml_loop|^tessera: error: yaml_loop\\.yaml"
        "bad_utf8|^tessera: error: bad_utf8\\.yaml:6: not valid UTF-8 \\(byte 0xe9\\)")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 regex)
  hostile(NAME scenario_file.${name} RC 2 REGEX "${regex}" ARGS run ${name}.yaml)
endforeach()
hostile(NAME scenario_file.missing RC 2 REGEX [=[^tessera: error: nope\.yaml: cannot open scenario file: no such file$]=] ARGS run nope.yaml)
hostile(NAME scenario_file.dev_zero RC 2 REGEX [=[^tessera: error: /dev/zero: scenario file is larger than 16 MiB]=]
        ARGS run /dev/zero)
hostile(NAME scenario_file.directory RC 2 REGEX [=[^tessera: error: \.: cannot open scenario file: is a directory$]=]
        ARGS run .)
hostile(NAME scenario_file.sweep_dev_zero RC 2 REGEX [=[/dev/zero: scenario file is larger]=]
        ARGS sweep /dev/zero --set cluster.nodes=1,2)

# --- Output paths: never an input, never two at once, never read-only. --------
hostile(NAME output.json_is_scenario RC 2 REGEX [=[^tessera: error: --json-out s\.yaml: refusing to overwrite the scenario]=]
        ARGS run s.yaml --json-out s.yaml)
hostile(NAME output.json_is_scenario_other_spelling RC 2 REGEX [=[refusing to overwrite the scenario]=]
        ARGS run s.yaml --json-out ./s.yaml)
hostile(NAME output.outputs_json_is_scenario RC 2
        REGEX [=[^tessera: error: outputs\.json s\.yaml: refusing to overwrite the scenario]=]
        ARGS run s.yaml --set outputs.json=s.yaml)
hostile(NAME output.trace_is_scenario RC 2 REGEX [=[--trace s\.yaml: refusing to overwrite the scenario]=]
        ARGS run s.yaml --trace s.yaml)
hostile(NAME output.links_is_scenario RC 2 REGEX [=[--links s\.yaml: refusing to overwrite the scenario]=]
        ARGS run s.yaml --links s.yaml)
hostile(NAME output.same_twice RC 2 REGEX [=[--json-out a\.json: the same file as --links a\.json: one output would be lost]=]
        ARGS run s.yaml --json-out a.json --links a.json)
hostile(NAME output.trace_and_json_same RC 2 REGEX [=[the same file as --trace]=]
        ARGS run s.yaml --trace t.json --json-out t.json)
hostile(NAME output.read_only RC 2 REGEX [=[--json-out ro\.json: refusing to replace a read-only file]=]
        ARGS run s.yaml --json-out ro.json SETUP readonly:ro.json)
hostile(NAME output.dev_null RC 2 REGEX [=[--json-out /dev/null: cannot write: not a regular file]=]
        ARGS run s.yaml --json-out /dev/null)
hostile(NAME output.directory RC 2 REGEX [=[--trace \.: cannot write: is a directory]=] ARGS run s.yaml --trace .)
hostile(NAME output.missing_directory RC 2 REGEX [=[--links no/such/x\.csv: cannot write: directory 'no/such' does not exist]=]
        ARGS run s.yaml --links no/such/x.csv)
hostile(NAME output.empty RC 2 REGEX [=[--json-out: empty output path]=] ARGS run s.yaml --json-out=)
hostile(NAME output.sweep_out_is_scenario RC 2 REGEX [=[--out s\.yaml: refusing to overwrite the scenario]=]
        ARGS sweep s.yaml --set cluster.nodes=1,2 --out s.yaml)
hostile(NAME output.sweep_svg_is_csv RC 2 REGEX [=[--svg x\.csv: the same file as --out x\.csv]=]
        ARGS sweep s.yaml --set cluster.nodes=1,2 --out x.csv --svg x.csv)
hostile(NAME output.sweep_read_only RC 2 REGEX [=[--out ro\.csv: refusing to replace a read-only file]=]
        ARGS sweep s.yaml --set cluster.nodes=1,2 --out ro.csv SETUP readonly:ro.csv)
hostile(NAME output.compare_svg_is_scenario RC 2 REGEX [=[--svg s\.yaml: refusing to overwrite the scenario]=]
        ARGS compare-schedules s.yaml --svg s.yaml)
hostile(NAME output.predict_kernels_output_is_input RC 2 REGEX [=[--output k_ok\.csv: refusing to overwrite --input]=]
        ARGS predict-kernels --device dev_ok.json --input k_ok.csv --output k_ok.csv)
# validate training --rows on its scenario (helper 107: it overwrote it).
hostile(NAME output.validate_training_rows_is_scenario RC 2 REGEX [=[--rows s\.yaml: refusing to overwrite --scenario]=]
        ARGS validate training --data runs_ok.csv --scenario s.yaml --rows s.yaml)
hostile(NAME output.validate_training_rows_is_kernel_overrides RC 2
        REGEX [=[--rows ovr_ok\.csv: refusing to overwrite node_model\.overrides \(ovr_ok\.csv\)]=]
        ARGS validate training --data runs_ok.csv --scenario s.yaml --set node_model.overrides=ovr_ok.csv --rows ovr_ok.csv)
hostile(NAME output.predict_kernels_output_is_device RC 2 REGEX [=[--output dev_ok\.json: refusing to overwrite --device]=]
        ARGS predict-kernels --device dev_ok.json --input k_ok.csv --output dev_ok.json)
hostile(NAME output.merge_out_is_shard RC 2 REGEX [=[--out shard_garbage\.csv: refusing to overwrite a shard]=]
        ARGS sweep-merge --out shard_garbage.csv shard_garbage.csv)
hostile(NAME output.train_predictor_out_is_file RC 2 REGEX [=[--out s\.yaml: not a directory]=]
        ARGS train-predictor --data . --out s.yaml)
hostile(NAME output.full_stdout RC 2 REGEX [=[^tessera: error: cannot write the output to stdout]=]
        ARGS run s.yaml STDOUT /dev/full)
# A report longer than stdout's buffer fails while the command runs: no
# stale cause (helper 102: "No such file or directory").
hostile(NAME output.full_stdout_kernels RC 2
        REGEX [=[^tessera: error: cannot write the output to stdout( \(a write to it failed\)|: No space left on device)$]=]
        ARGS kernels s.yaml --out /tmp/tessera_hostile_full_kernels.csv STDOUT /dev/full)
hostile(NAME output.full_stdout_version RC 2 REGEX [=[^tessera: error: cannot write the output to stdout]=]
        ARGS --version STDOUT /dev/full)

# --- Command-line options. ---------------------------------------------------
hostile(NAME options.bare RC 2 REGEX "^usage: tessera <command>" MULTILINE)
hostile(NAME options.unknown_command RC 2 REGEX [=[unknown command 'fly']=] ARGS fly)
hostile(NAME options.unknown_flag RC 2 REGEX [=[--fast]=] ARGS run s.yaml --fast)
hostile(NAME options.missing_value RC 2 REGEX [=[--trace]=] ARGS run s.yaml --trace)
hostile(NAME options.no_scenario RC 2 REGEX [=[scenario]=] ARGS run)
hostile(NAME options.two_scenarios RC 2 REGEX [=[scenario]=] ARGS run s.yaml s.yaml)
hostile(NAME options.bad_backend RC 2 REGEX [=[unknown backend 'tpu']=] ARGS run s.yaml --backend tpu)
hostile(NAME options.set_without_value RC 2 REGEX [=[--set 'cluster\.nodes': expected key\.path=value]=]
        ARGS run s.yaml --set cluster.nodes)
hostile(NAME options.set_through_scalar RC 2 REGEX [=['training\.micro_batch' is not a mapping]=] ARGS run s.yaml --set training.micro_batch.x=1)
hostile(NAME options.set_malformed RC 2 REGEX [=[malformed value]=] ARGS run s.yaml "--set" "cluster.nodes=[1, 2")
foreach(jobs IN ITEMS 0 -1 2x 99999 " 2")
  string(MAKE_C_IDENTIFIER "${jobs}" id)
  hostile(NAME options.sweep_jobs_${id} RC 2 REGEX [=[^tessera: error: --jobs: ]=]
          ARGS sweep s.yaml --set cluster.nodes=1,2 --jobs "${jobs}")
endforeach()
foreach(shard IN ITEMS 2/2 -1/2 1/0 x/2 1/-2 3 1/2000000)
  string(MAKE_C_IDENTIFIER "${shard}" id)
  hostile(NAME options.sweep_shard_${id} RC 2 REGEX [=[--shard]=]
          ARGS sweep s.yaml --set cluster.nodes=1,2 --shard ${shard})
endforeach()
foreach(env IN ITEMS "PMI_RANK=0;PMI_SIZE=-1" "PMI_RANK=-1;PMI_SIZE=2" "OMPI_COMM_WORLD_RANK=5;OMPI_COMM_WORLD_SIZE=2"
        "SLURM_ARRAY_TASK_ID=x;SLURM_ARRAY_TASK_COUNT=2"
        "SLURM_ARRAY_TASK_ID=3;SLURM_ARRAY_TASK_COUNT=2;SLURM_ARRAY_TASK_MIN=0;SLURM_ARRAY_TASK_STEP=2"
        "SLURM_ARRAY_TASK_ID=0;SLURM_ARRAY_TASK_COUNT=2;SLURM_ARRAY_TASK_MIN=1"
        "SLURM_ARRAY_TASK_ID=5;SLURM_ARRAY_TASK_COUNT=2;SLURM_ARRAY_TASK_MIN=1"
        "SLURM_ARRAY_TASK_ID=1;SLURM_ARRAY_TASK_COUNT=3;SLURM_ARRAY_TASK_MIN=0;SLURM_ARRAY_TASK_MAX=5")
  string(MAKE_C_IDENTIFIER "${env}" id)
  hostile(NAME options.shard_env_${id} RC 2 REGEX [=[--shard auto]=]
          ARGS sweep s.yaml --set cluster.nodes=1,2 --shard auto ENV ${env})
endforeach()
# A rank variable without its size is named (helper 136: "no Slurm array
# variables" with SLURM_ARRAY_TASK_ID set).
hostile(NAME options.shard_env_id_without_count RC 2
        REGEX [=[^tessera: error: tessera sweep: --shard auto: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not \(a Slurm array job sets both; or give --shard I/N\)$]=]
        ARGS sweep s.yaml --set cluster.nodes=1,2 --shard auto ENV "SLURM_ARRAY_TASK_ID=3")
# ... even where srun in the array task sets PMI_RANK 0 of PMI_SIZE 1, which
# would run the whole sweep as shard 0/1 (helper 138); an MPI variable alone
# is an MPI launcher's, not an array job's.
hostile(NAME options.shard_env_id_without_count_under_srun RC 2
        REGEX [=[SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not]=]
        ARGS sweep s.yaml --set cluster.nodes=1,2 --shard auto ENV "SLURM_ARRAY_TASK_ID=3;PMI_RANK=0;PMI_SIZE=1")
hostile(NAME options.shard_env_size_without_rank RC 2
        REGEX [=[^tessera: error: tessera sweep: --shard auto: PMI_SIZE is set but PMI_RANK is not \(an MPI launcher sets both; or give --shard I/N\)$]=]
        ARGS sweep s.yaml --set cluster.nodes=1,2 --shard auto ENV "PMI_SIZE=2")
hostile(NAME options.sweep_no_axes RC 2 REGEX [=[give at least one --set]=] ARGS sweep s.yaml)
hostile(NAME options.merge_garbage RC 2 REGEX [=[shard_garbage\.csv: not a shard CSV]=]
        ARGS sweep-merge --out m.csv shard_garbage.csv)
hostile(NAME options.merge_missing_file RC 2 REGEX [=[nope\.csv: cannot open shard CSV]=] ARGS sweep-merge --out m.csv nope.csv)
hostile(NAME options.epochs_negative RC 2 REGEX [=[^tessera: error: --epochs: expected a positive integer, got '-5'$]=]
        ARGS train-predictor --data . --out w --epochs -5)
hostile(NAME options.dtype_unknown RC 2 REGEX [=[--dtype]=]
        ARGS predict-kernels --device dev_ok.json --input k_ok.csv --output o.csv --dtype fp64)

# --- Device JSON files (predict-kernels --device). -----------------------------
foreach(dev IN ITEMS dev_dup dev_badescape dev_lone_surrogate dev_trailing dev_deep dev_empty dev_negative_sms
                     dev_string_sms dev_huge_bw dev_inf_bw dev_fraction_sms dev_zero_mem dev_missing dev_array dev_null)
  hostile(NAME device_json.${dev} RC 2 REGEX "^tessera: error: ${dev}\\.json"
          ARGS predict-kernels --device ${dev}.json --input k_ok.csv --output o.csv)
endforeach()
hostile(NAME device_json.dev_zero RC 2 REGEX [=[^tessera: error: /dev/zero: file is larger than 256 MiB]=]
        ARGS predict-kernels --device /dev/zero --input k_ok.csv --output o.csv)

# --- Kernel CSV files (predict-kernels --input). -------------------------------
foreach(k IN ITEMS k_badop k_negative k_nan k_huge k_ragged k_quote k_dtype k_nocolumns k_empty)
  hostile(NAME kernel_csv.${k} RC 2 REGEX "^tessera: error: ${k}\\.csv"
          ARGS predict-kernels --device dev_ok.json --input ${k}.csv --output o.csv)
endforeach()
# A column named twice (which is meant?), a hexadecimal number (strtod reads
# it), dimensions whose bytes pass 2^62 (they wrapped to a small time).
hostile(NAME kernel_csv.k_dup_column RC 2
        REGEX [=[^tessera: error: k_dup_column\.csv: column 'B' appears twice in the header \(columns 2 and 4\)$]=]
        ARGS predict-kernels --device dev_ok.json --input k_dup_column.csv --output o.csv)
hostile(NAME kernel_csv.k_hex RC 2 REGEX [=[^tessera: error: k_hex\.csv: row 1, column 'B': '0x10' is not a number$]=]
        ARGS predict-kernels --device dev_ok.json --input k_hex.csv --output o.csv)
hostile(NAME kernel_csv.k_overflow_bytes RC 2
        REGEX [=[^tessera: error: k_overflow_bytes\.csv: row 1: add kernel: its dimensions move 1\.2e\+19 bytes, more than the 2\^62 \(4 EiB\) a kernel may \(a dimension too large\?\)$]=]
        ARGS predict-kernels --device dev_ok.json --input k_overflow_bytes.csv --output o.csv)
# A NeuSight-layout folder (device configs beside the kernels) is FP32: a
# bf16 row was read as FP32 (twice its bytes) and validated or trained on.
hostile(NAME kernel_csv.neusight_folder_bf16 RC 2
        REGEX [=[^tessera: error: ns_bf16/kernels/vector\.csv: row 2, column 'dtype': 'bf16': a measurement folder with device configs holds FP32 kernels \(the tile-mlp's\); check bf16 kernels with `validate kernels --data FILE\.csv --device GPU`$]=]
        ARGS validate kernels --data ns_bf16/kernels)

# --- HuggingFace configs (predict-model --model). ------------------------------
foreach(hf IN ITEMS hf_negative hf_string hf_huge hf_fraction hf_heads hf_type hf_dup hf_zero_hidden hf_huge_vocab)
  hostile(NAME hf_config.${hf} RC 2 REGEX "^tessera: error: ${hf}\\.json"
          ARGS predict-model --model ${hf}.json --device dev_ok.json --batch 1 --seq 16 --mode train)
endforeach()
hostile(NAME hf_config.batch_zero RC 2 REGEX [=[--batch]=]
        ARGS predict-model --model hf_ok.json --device dev_ok.json --batch 0 --seq 16 --mode train)
hostile(NAME hf_config.mode RC 2 REGEX [=[--mode]=]
        ARGS predict-model --model hf_ok.json --device dev_ok.json --batch 1 --seq 16 --mode sing)

# --- Valid but huge: refused at once with the estimate, not run for hours. ----
hostile(NAME huge.nodes_million RC 2
        REGEX [=[^tessera: error: s\.yaml:[0-9]+:[0-9]+: cluster\.fabric\.spines: 1000000 leaves x 8 spines and 8000000 GPUs need more than 20000000 directed links \(about 3\.9 GiB\), the most that are built: fewer cluster\.nodes or cluster\.fabric\.spines \(with --set cluster\.nodes=1000000, --set parallelism\.dp=8000000\)$]=]
        ARGS run s.yaml --set cluster.nodes=1000000 --set parallelism.dp=8000000)
hostile(NAME huge.dp_eight_million RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set parallelism\.dp\): parallelism\.dp, cluster\.nodes, collectives\.chunks, parallelism\.bucket_size: one iteration would take about .* engine events]=]
        ARGS run s.yaml --set cluster.nodes=125000 --set parallelism.dp=1000000 --set cluster.fabric.hosts_per_leaf=64
             --set collectives.granularity=steps)
# 20000-port switches for 16 GPUs: one leaf and its 10000 spines are built
# (the whole tree was 400 M directed links, about 78 GiB).
hostile(NAME huge.fat_tree_radix_memory RC 0 REGEX [=[Iteration +[0-9.]+ ms]=]
        ARGS run fat_tree.yaml --set cluster.fabric.k=20000)
# tiers: auto grows the k=8 tree to 3 tiers past 4 nodes of 8 and says so
# (the core links default to the spine links), and past 16 names k.
hostile(NAME fat_tree_tiers_auto RC 0 REGEX [=[fat-tree fabric, 3 tiers by tiers: auto, a node across 2 leaves\)]=]
        ARGS run fat_tree.yaml --set cluster.fabric.tiers=auto --set cluster.nodes=5 --set parallelism.dp=auto)
hostile(NAME fat_tree_tiers_auto_full RC 2
        REGEX [=[^tessera: error: fat_tree\.yaml:13:8: cluster\.fabric\.k: a k=8 3-tier fat-tree \(the most tiers: auto builds\) attaches 128 HCAs, but the cluster has 136]=]
        ARGS run fat_tree.yaml --set cluster.fabric.tiers=auto --set cluster.nodes=17 --set parallelism.dp=auto)
hostile(NAME huge.global_batch RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set training\.global_batch\): training\.global_batch, training\.micro_batch, model\.layers: one iteration would take about .* 6\.25e\+07 micro-batches per replica]=]
        ARGS run s.yaml --set training.global_batch=1000000000 --set training.micro_batch=1)
hostile(NAME huge.chunks RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set collectives\.chunks\): parallelism\.dp, cluster\.nodes, collectives\.chunks, parallelism\.bucket_size: one iteration would take]=]
        ARGS run s.yaml --set collectives.chunks=1000000000 --set collectives.granularity=steps)
# As flows, a ring's connections ignore chunks: the same run is small.
hostile(NAME huge.chunks_as_flows RC 0 REGEX [=[Iteration +205\.843 ms]=]
        ARGS run s.yaml --set collectives.chunks=1000000000)
hostile(NAME huge.sweep_point RC 2
        REGEX [=[^tessera: error: .*one iteration would take about]=]
        ARGS sweep s.yaml --set training.global_batch=128,1000000000 --set training.micro_batch=1)

# --- torch.fx operator graphs and their labels (predict-graph). --------------
foreach(g IN ITEMS g_letters g_deep g_huge_dim g_overflow_elements g_overflow_zero g_negative_latency g_nan_latency g_inf_bw)
  hostile(NAME fx_graph.${g} RC 2 REGEX "^tessera: error: ${g}\\.csv: row 1"
          ARGS predict-graph --graph ${g}.csv --device dev_ok.json)
endforeach()
foreach(g IN ITEMS g_label_negative g_label_huge g_label_fraction g_label_string)
  hostile(NAME fx_label.${g} RC 2 REGEX "^tessera: error: ${g}\\.json: key 'num_layer' must be a whole number from 1 to 100000"
          ARGS predict-graph --graph ${g}.csv --device dev_ok.json)
endforeach()
hostile(NAME fx_label.g_label_nan RC 2 REGEX "^tessera: error: g_label_nan\\.json"
        ARGS predict-graph --graph g_label_nan.csv --device dev_ok.json)

# --- Measured kernel times (node_model.overrides): every bad row names the
# key, the file, the row and its line, the column and the value. -------------
function(hostile_overrides name regex)
  hostile(NAME overrides.${name} RC 2
          REGEX "^tessera: error: s\\.yaml \\(--set node_model\\.overrides\\): node_model\\.overrides: ${regex}"
          ARGS run s.yaml --set node_model.overrides=${ARGN})
  set(hostile_count ${hostile_count} PARENT_SCOPE)
endfunction()
# A time the run cannot hold (two uses of 5,000,000 s overflow 64-bit
# picoseconds): the error names the override's line, not training's keys.
hostile(NAME overrides.time_overflows_the_run RC 2
        REGEX [=[^tessera: error: s\.yaml: node_model\.overrides: ovr_overflowing_time\.csv line 2: 5000000s cannot be simulated: time overflow]=]
        ARGS run s.yaml --set node_model.overrides=ovr_overflowing_time.csv)
# The same as a fused kernel's part (part_time_us; helper 77: the error
# blamed training's keys).
hostile(NAME overrides.part_time_overflows_the_run RC 2
        REGEX [=[^tessera: error: s\.yaml: node_model\.overrides: ovr_overflowing_part_time\.csv line 2: part_time_us 5000000s cannot be simulated: time overflow]=]
        ARGS run s.yaml --set node_model.overrides=ovr_overflowing_part_time.csv)
hostile_overrides(unknown_op [=[ovr_unknown_op\.csv: row 1 \(line 2\), column 'op': unknown op 'conv2d' \(expected bmm, linear]=]
                  ovr_unknown_op.csv)
hostile_overrides(unknown_dtype [=[ovr_unknown_dtype\.csv: row 1 \(line 2\), column 'dtype': unknown dtype 'fp64']=]
                  ovr_unknown_dtype.csv)
hostile_overrides(zero_time [=[ovr_zero_time\.csv: row 1 \(line 2\), column 'time_us': time must be positive \(got '0'\)$]=]
                  ovr_zero_time.csv)
hostile_overrides(negative_time [=[ovr_negative_time\.csv: row 1 \(line 2\), column 'time_us': time must be positive \(got '-3'\)$]=]
                  ovr_negative_time.csv)
hostile_overrides(nan_time [=[ovr_nan_time\.csv: row 1 \(line 2\), column 'time_us': 'nan' is not a number$]=]
                  ovr_nan_time.csv)
hostile_overrides(huge_time [=[ovr_huge_time\.csv: row 1 \(line 2\), column 'time_us': time overflow]=]
                  ovr_huge_time.csv)
hostile_overrides(negative_dim [=[ovr_negative_dim\.csv: row 1 \(line 2\), column 'n': dimension must be a positive whole number \(got '-8'\)$]=]
                  ovr_negative_dim.csv)
hostile_overrides(missing_column [=[ovr_missing_column\.csv: missing column 'time_us'$]=] ovr_missing_column.csv)
hostile_overrides(duplicate [=[ovr_duplicate\.csv: row 3 \(line 4\): linear b=1 m=8 n=8 k=8 bf16 is listed twice, first on row 1 \(line 2\)]=]
                  ovr_duplicate.csv)
hostile_overrides(header_only [=[ovr_header_only\.csv: no kernel times]=] ovr_header_only.csv)
hostile_overrides(not_kernels [=[ovr_not_kernels\.csv: line 1: not a kernel-time CSV]=] ovr_not_kernels.csv)
hostile_overrides(two_devices [=[ovr_two_devices\.csv: row 2 \(line 3\), column 'Device': 'Tesla V100-PCIE-32GB' differs from 'NVIDIA A100-PCIE-40GB']=]
                  ovr_two_devices.csv)
hostile_overrides(neusight_unknown_op [=[ovr_neusight_unknown_op\.csv: row 1 \(line 2\), column 'OPName': unknown op 'conv2d']=]
                  ovr_neusight_unknown_op.csv)
hostile_overrides(torch_bad_shape [=[ovr_torch_bad_shape\.csv: row 1 \(line 2\), column 'input_shapes': '\[\[4096, 1024\], \[1024 3072\]\]' is not a list of shapes]=]
                  ovr_torch_bad_shape.csv)
hostile_overrides(torch_text_time [=[ovr_torch_text_time\.csv: row 1 \(line 2\), column 'device_time_total_us': 'n/a' is not a number$]=]
                  ovr_torch_text_time.csv)
hostile_overrides(missing_file [=[nope\.csv: cannot open kernel-time override CSV: no such file$]=] nope.csv)
hostile_overrides(dev_zero [=[/dev/zero: kernel-time override CSV is larger than]=] /dev/zero)
hostile_overrides(empty_path [=[empty path$]=] "''")
hostile_overrides(no_value [=[has no value$]=] "~")
hostile_overrides(list [=[expected a single value, not a list or mapping$]=] "[ovr_ok.csv]")
hostile(NAME overrides.unknown_key RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set node_model\.overides\): node_model\.overides: unknown key, did you mean 'overrides'\? \(known here: overrides, weights\)$]=]
        ARGS run s.yaml --set node_model.overides=ovr_ok.csv)
# A sweep over a scenario with overrides says they match by exact shape (a
# point of another micro-batch is predicted, and its row cannot say so).
hostile(NAME overrides.sweep_says_exact_shape RC 0
        REGEX [=[note: node_model\.overrides match kernels by exact shape]=]
        ARGS sweep s.yaml --set node_model.overrides=ovr_ok.csv --set training.micro_batch=4,8 --jobs 1)
hostile(NAME overrides.output_is_override RC 2 REGEX [=[--json-out ovr_ok\.csv: refusing to overwrite node_model\.overrides]=]
        ARGS run s.yaml --set node_model.overrides=ovr_ok.csv --json-out ovr_ok.csv)

# --- Jobs: `placement` (random with a seed). ------------------------------------
foreach(case IN ITEMS "text|abc" "negative|-1" "fraction|2.5" "huge|4294967296" "list|[1, 2]")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 tag)
  list(GET parts 1 value)
  hostile(NAME jobs.placement_seed_${tag} RC 2
          REGEX [=[^tessera: error: jobs\.yaml \(--set placement\.seed\): placement\.seed: expected an integer in 0\.\.4294967295$]=]
          ARGS run jobs.yaml --set "placement.seed=${value}")
endforeach()
hostile(NAME jobs.placement_policy RC 2
        REGEX [=[^tessera: error: jobs\.yaml \(--set placement\.policy\): placement\.policy: expected packed, spread or random$]=]
        ARGS run jobs.yaml --set placement.policy=scattered)
hostile(NAME jobs.placement_seed_not_random RC 2
        REGEX [=[^tessera: error: jobs\.yaml:[0-9]+:[0-9]+: placement\.seed: a seed is only used by policy random \(with --set placement\.policy=packed\)$]=]
        ARGS run jobs.yaml --set placement.policy=packed)
hostile(NAME jobs.placement_unknown_key RC 2
        REGEX [=[^tessera: error: jobs\.yaml \(--set placement\.sead\): placement\.sead: unknown key, did you mean 'seed'\? \(placement has policy and seed\)$]=]
        ARGS run jobs.yaml --set placement.sead=3)

# --- failures: with `at:` (a cable failing during the run). ------------------
hostile(NAME failures.at_negative RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set failures\.links\): failures\.links\[0\]\.at: invalid time '-1ms': must not be negative$]=]
        ARGS run s.yaml --set "failures.links=[{cable: leaf0-spine1, at: -1ms}]")
hostile(NAME failures.at_not_a_time RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set failures\.links\): failures\.links\[0\]\.at: ]=]
        ARGS run s.yaml --set "failures.links=[{cable: leaf0-spine1, at: soon}]")
hostile(NAME failures.at_unknown_vertex RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set failures\.links\): failures\.links\[0\]: leaf0-spine9: topology: no vertex named 'spine9' \(the names are gpu0\.\.gpu15, nvswitch0\.\.nvswitch1, leaf0\.\.leaf1, spine0\.\.spine7\)$]=]
        ARGS run s.yaml --set "failures.links=[{cable: leaf0-spine9, at: 1ms}]")
hostile(NAME failures.at_unknown_cable RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set failures\.degraded\): failures\.degraded\[0\]: leaf0-leaf1: topology: no cable between leaf0 and leaf1$]=]
        ARGS run s.yaml --set "failures.degraded=[{cable: leaf0-leaf1, at: 1ms}]" --set failures.degraded_rate=0.5)
hostile(NAME failures.at_unknown_key RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set failures\.links\): failures\.links\[0\]\.when: unknown key]=]
        ARGS run s.yaml --set "failures.links=[{cable: leaf0-spine1, when: 1ms}]")
hostile(NAME failures.at_two_cables RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set failures\.links\): failures\.links\[0\]\.cable: expected one cable$]=]
        ARGS run s.yaml --set "failures.links=[{cable: 'leaf0-spine1, leaf0-spine2', at: 1ms}]")
if(TESSERA_WITH_NS3)
  hostile(NAME failures.at_with_ns3 RC 2
          REGEX [=[^tessera: error: s\.yaml \(--set failures\.links\): failures\.links\[0\]: leaf0-spine1: `at:` after 0 \(a failure during the run\) is not supported by the ns3 backend]=]
          ARGS run s.yaml --backend ns3 --set "failures.links=[{cable: leaf0-spine1, at: 1ms}]")
endif()

# --- validate collectives --nccl-tests: a user's nccl-tests output. ------------
hostile(NAME nccl_tests.binary RC 2
        REGEX [=[^tessera: error: binary\.yaml: no rank lines \('#  Rank 0 Group 0 Pid P on HOST device 0 \.\.\.'\): not the output of an nccl-tests run$]=]
        ARGS validate collectives --nccl-tests binary.yaml --scenario s.yaml)
hostile(NAME nccl_tests.dev_zero RC 2
        REGEX [=[^tessera: error: /dev/zero: --nccl-tests file is larger than 16 MiB, the limit for input files$]=]
        ARGS validate collectives --nccl-tests /dev/zero --scenario s.yaml)
hostile(NAME nccl_tests.missing RC 2
        REGEX [=[^tessera: error: gone\.txt: cannot open --nccl-tests file: no such file$]=]
        ARGS validate collectives --nccl-tests nccl_all_gather_perf.txt,gone.txt --scenario s.yaml)
hostile(NAME nccl_tests.empty_name RC 2
        REGEX [=[^tessera: error: --nccl-tests: expected FILE\[,FILE\.\.\.\] \(an empty name in the list\)$]=]
        ARGS validate collectives --nccl-tests nccl_all_gather_perf.txt, --scenario s.yaml)
# One file named twice (here as ./FILE too) would weigh twice in --fit.
hostile(NAME nccl_tests.file_twice RC 2
        REGEX [=[^tessera: error: --nccl-tests: \./nccl_all_gather_perf\.txt is named twice \(as nccl_all_gather_perf\.txt\): each file weighs the same once$]=]
        ARGS validate collectives --nccl-tests nccl_all_gather_perf.txt,./nccl_all_gather_perf.txt --scenario s.yaml)
hostile(NAME nccl_tests.no_scenario RC 2
        REGEX [=[^tessera: error: --nccl-tests needs --scenario CLUSTER\.yaml]=]
        ARGS validate collectives --nccl-tests nccl_all_gather_perf.txt)
hostile(NAME nccl_tests.cluster_too_small RC 2
        REGEX [=[^tessera: error: nccl_all_gather_perf\.txt: the run spans 2 hosts, the scenario's cluster has 1 node$]=]
        ARGS validate collectives --nccl-tests nccl_all_gather_perf.txt --scenario s.yaml --set cluster.nodes=1
             --set parallelism.dp=8)
hostile(NAME nccl_tests.fit_network_without_hosts RC 2
        REGEX [=[^tessera: error: --fit network: no run across hosts, with rows of 1 MiB and more$]=]
        ARGS validate collectives --nccl-tests nccl_all_reduce_perf_old.txt --scenario s.yaml --fit network)
# The ns-3 point-to-point model: packets up to 1 MiB (not InfiniBand's
# MTUs), and no per-link counts for --links (it wrote a header alone).
hostile(NAME ns3.p2p_mtu_too_large RC 2
        REGEX [=[^tessera: error: s\.yaml \(--set ns3\.mtu\): ns3\.mtu: a point-to-point packet is 1B to 1MiB, got 2MiB]=]
        ARGS run s.yaml --set ns3.model=point-to-point --set ns3.mtu=2MiB)
hostile(NAME ns3.p2p_links RC 2
        REGEX [=[^tessera: error: --links: the ns-3 point-to-point model keeps no per-link counts]=]
        ARGS run s.yaml --backend ns3 --set ns3.model=point-to-point --links l.csv)
# --fit all on runs of one host fits NVLink and keeps the network's, saying so
# (it was the error above, naming a --fit network the user did not type).
hostile(NAME nccl_tests.fit_all_one_host RC 0
        REGEX [=[note: --fit all fits nvlink only \(network: no run across hosts, with rows of 1 MiB and more\): the network constants are the scenario's]=]
        ARGS validate collectives --nccl-tests nccl_all_reduce_perf_old.txt --scenario s.yaml --fit all)
