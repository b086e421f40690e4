// The containers' errors (include/flx/layers/containers.hpp): the rest of
// them is templates.
#include "flx/layers/containers.hpp"

namespace flx::detail {

void arity_error(const std::string& container, size_t layers, size_t inputs, const std::string& shapes) {
  FLX_THROW(ArgumentError, container, " with ", layers, " sub-layers can take one input or ", layers,
            " inputs (one a layer), but got ", inputs, " inputs of shapes ", shapes,
            "; pass one input for every layer, or a single input that each layer takes");
}

void connection_error(const std::string& container, const std::string& connection, const std::string& shapes,
                      const char* what) {
  FLX_THROW(DimensionMismatch, container, ": its connection ", connection, " cannot combine values of shapes ",
            shapes, "; make them fit the connection (", what, ")");
}

void check_maxout_size(size_t n) {
  FLX_CHECK(n >= 1, ArgumentError, "Maxout: needs at least one layer; got none");
}

}  // namespace flx::detail
