#pragma once
// drx::data: Fashion-MNIST and Brown Corpus loading, federated partitions, cohort sampling and
// batching.
#include "drx/data/batching.h"
#include "drx/data/brown.h"
#include "drx/data/idx.h"
#include "drx/data/partition.h"
#include "drx/data/sampling.h"
