#pragma once
#include "algorithms/algorithm.h"
namespace nodus {
extern const Algorithm kTreeAlgorithm;
// Parent of label x (1..p) in the binary tree over labels 1..p; 0 at the root.
int binaryTreeParent(int x, int p);
// Levels below the root of that tree.
int binaryTreeDepth(int p);
}  // namespace nodus
