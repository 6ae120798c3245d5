#pragma once
// The graph policies remat ships, declared once, for a MILP backend M (milp::cbc or
// milp::lpsolve, whose headers this one does not include): store_all, checkmate, rockmate with
// checkmate on the blocks, hiremate (not in the portfolio: minutes where rockmate takes seconds),
// offmate (parameters, optimizer states and activations; not in the portfolio: its budget is the
// whole GPU's), and dtr (the runtime's evictions replayed, not a plan: not in the portfolio).
// remat-plan's --policy choices for --graph, its dispatch and help, and the check of the README's
// policy table come from this list and chain_policies.

#include <remat/milp/model.hpp>
#include <remat/policy/catalogue.hpp>
#include <remat/policy/checkmate.hpp>
#include <remat/policy/dtr.hpp>
#include <remat/policy/hiremate.hpp>
#include <remat/policy/offmate.hpp>
#include <remat/policy/rockmate.hpp>
#include <remat/policy/store_all.hpp>

namespace remat {

/// Every graph policy, for the MILP backend M.
template <milp::MilpBackend M>
using graph_policies =
    policy_list<store_all, checkmate<M>, rockmate<checkmate<M>>, hiremate<M>, offmate<M>, dtr<>>;

/// Every policy: the chain policies, then the graph policies that are not chain policies.
template <milp::MilpBackend M>
using all_policies = merge_policies<chain_policies, graph_policies<M>>;

}  // namespace remat
