#pragma once
// drx::data: Fashion-MNIST and Brown Corpus loading, federated partitions, cohort sampling and
// padding, batching, byte-level language-model windows and training checkpoints.
#include "drx/data/batching.h"
#include "drx/data/brown.h"
#include "drx/data/checkpoint.h"
#include "drx/data/cohort.h"
#include "drx/data/idx.h"
#include "drx/data/lm_windows.h"
#include "drx/data/partition.h"
#include "drx/data/sampling.h"
