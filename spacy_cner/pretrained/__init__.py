"""Weights and segmenters trained elsewhere: fetched hash-checked, read, converted and packaged.

fetch and simple_index (a package's sdist from the indexes pip uses), paddle_tensor (paddle's tensor files), lac,
lac_net and lac_analyzer (Baidu's LAC in torch), lac_probabilities (its entities' probabilities), lac_pipeline and
lac_package (the ready LAC pipeline, as a folder or an installed package), jieba_segmenter (jieba's words on rjieba).
"""
