#pragma once
// Mesh moved to drx/core/mesh.h (a logical concept, below the executor); this
// path stays for code that includes it.
#include "drx/core/mesh.h"
