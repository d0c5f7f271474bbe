"""DrJAX's temperature-sensor example, from Python: each client (a sensor) holds readings;
the server asks which fraction of each sensor's readings lie above a threshold it
broadcasts, and averages those fractions over the sensors.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/temperature_sensors.py
"""
import numpy as np

import drx

SENSORS, READINGS = 16, 24


@drx.program(placements={"clients": SENSORS})
def fraction_above(threshold, readings):
    def per_sensor(r, t):
        return (r > t).astype(np.float32).mean()

    fractions = drx.map_fn(per_sensor, (readings, drx.broadcast(threshold)))
    return drx.reduce_mean(fractions)


def main():
    rng = np.random.default_rng(0)
    readings = rng.normal(20.0, 5.0, size=(SENSORS, READINGS)).astype(np.float32)
    threshold = np.float32(22.0)
    got = drx.jit(fraction_above)(threshold, readings)
    want = np.mean([(r > threshold).mean() for r in readings])
    print(f"fraction of readings above {threshold}: {float(got):.6f} (NumPy: {want:.6f})")
    assert abs(float(got) - want) < 1e-6, (got, want)
    print(drx.make_program(fraction_above)(threshold, readings))


if __name__ == "__main__":
    main()
