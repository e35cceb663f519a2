# The README's "Use it in PyTorch" example, as it stands there (tests/cli_readme.sh
# checks that the README shows exactly the lines below this comment, and runs them
# on a generated folder in place of /data/train).
import stoker

loader = stoker.Loader("/data/train", batch_size=64, shuffle=True, seed=0,
                       image=stoker.Image(224))  # decode, random crop and flip in C threads
for epoch in range(2):
    loader.set_epoch(epoch)                      # a new order each epoch
    for images, labels in loader:                # uint8 (64, 3, 224, 224), int64 (64,)
        pass                                     # your training step
print("{kind}: {evidence}; try: {try}".format(**loader.diagnose()))  # what held it back
