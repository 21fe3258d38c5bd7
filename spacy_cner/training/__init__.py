"""What only training uses: adversarial perturbations (FGM/FGSM), augmentation (mention replacement,
joined pairs), settings computed from the corpus size (batches, epochs, patience), checkpoint
averaging, character and bigram vectors trained on the train text, the shipped configs, and the logger that
draws the training curve and calibration plot (logger.py, plots.py, reliability.py)."""
