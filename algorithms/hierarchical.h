#pragma once
#include "algorithms/algorithm.h"
namespace nodus {
extern const Algorithm kHierarchicalAlgorithm;
}
