"""What only training uses: adversarial perturbations (FGM/FGSM), augmentation (mention replacement,
joined pairs), settings computed from the corpus size (batches, epochs, patience), checkpoint
averaging, and character and bigram vectors trained on the train text."""
