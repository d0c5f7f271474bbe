// Built against an installed drx's dist component (tests/install/run.sh runs
// it under mpirun -np 2): each rank passes only its own clients' rows of a
// placement of 6 and gets the mean over all 6, checked against the value
// computed here by hand.
#include <drx/dist/dist.h>
#include <drx/drx.h>

#include <cstdio>

int main(int argc, char** argv) {
  try {
    drx::dist::World& world = drx::dist::init(argc, argv);
    auto mean_of = drx::program({{"clients", 6}}, [](drx::Value x) { return drx::reduce_mean(x); },
                                {"clients"});
    auto f = drx::jit(mean_of, world.mesh("clients"));
    const auto [first, end] = world.clients(6);
    drx::Array mine(drx::f32, {end - first});
    for (int64_t c = first; c < end; ++c) mine.data<float>()[c - first] = static_cast<float>(c * c);
    const float got = f(drx::dist::place_rows(mine, 6, world)).item<float>();
    // (0 + 1 + 4 + 9 + 16 + 25) / 6
    if (got != 55.0f / 6.0f) {
      std::fprintf(stderr, "dist app: rank %d got %g, want %g\n", world.rank(), got, 55.0 / 6.0);
      return 1;
    }
    if (world.is_root()) std::printf("dist app: OK on %d ranks\n", world.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist app: %s\n", e.what());
    return 1;
  }
}
