"""The one measurement layer: every benchmark, load run, soak, experiment and report uses it.

    hdr      latencies in microseconds on HdrHistogram; CO-corrected beside service time
"""
