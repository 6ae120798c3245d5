#pragma once
// What the executor and the profiler need from the user's types, one header each:
//   concepts/tensor.hpp       tensor_traits, Tensor, ScalarTensor, AddableTensor
//   concepts/backend.hpp      Backend and the optional TransferBackend (with TransferableTensor),
//                             TimingBackend, RunAwareBackend, SynchronizingBackend
//   concepts/layer.hpp        what every layer shares: pointer-likes, layer_role, no_targets,
//                             HasRandomState
//   concepts/chain_layer.hpp  chain_layer_traits, ChainLayer, check_chain_layer(_as)
//   concepts/dag_layer.hpp    dag_layer_traits, backward_needs, DagLayer, check_dag_layer(_as)
//   concepts/model.hpp        model_traits (a range or tuple of layers), dag_op, dag_model
//   concepts/parameters.hpp   parameter_traits, HasParameters (a layer's parameters, optional)
// Names follow one scheme: chain_layer_traits / ChainLayer / check_chain_layer for chain layers,
// dag_layer_traits / DagLayer / check_dag_layer for DAG layers. Host-only: no CUDA header here.
// docs/executor.md, "What your types provide".

#include <remat/exec/concepts/backend.hpp>
#include <remat/exec/concepts/chain_layer.hpp>
#include <remat/exec/concepts/dag_layer.hpp>
#include <remat/exec/concepts/layer.hpp>
#include <remat/exec/concepts/model.hpp>
#include <remat/exec/concepts/parameters.hpp>
#include <remat/exec/concepts/tensor.hpp>
