// The fake plugin's compile side (built into the kNormal variant only).
//
// Options read at plugin_create:
//   fake.compile_ops=Relu,Add   op types it claims (default: none)
//   fake.compile_fault=KIND     compile misbehaves, for the host's checks:
//                               fail, null_blob, bad_key, bad_version,
//                               new_blob (made with new[], not the host's allocate)
// A subgraph that is a single Add of two graph inputs compiles to "fake:add"
// (which executes); anything else compiles to "fake:graph:<op types>", which
// the host stores but the fake cannot load.
#pragma once

#include <set>
#include <string>

#include "loom/plugin.hpp"

namespace fake_compile {

// Splits "Relu,Add"; false on an empty name.
bool parse_ops(const char* value, std::set<std::string>* ops);

// Claims the nodes of the (verified) graph whose op type is in `ops`.
loom::sdk::Status supported(const std::set<std::string>& ops, const loom::sdk::GraphView& graph,
                            loom::sdk::Claims* claims);

// Checks that every node is claimed and sets *blob; returns an error message,
// empty on success.
std::string compile(const std::set<std::string>& ops, const loom::sdk::GraphView& graph,
                    std::string* blob);

}  // namespace fake_compile
