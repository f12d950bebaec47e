"""The dg demo: watch DiffusionGemma denoise its canvas, race it against AR decoding, learn how it works.

The app lives in dg/ui/ (dg.ui.app builds it from the tab modules); this file only starts it.

    python app.py [--model DIR_OR_ID] [--ar-model DIR_OR_ID] [--port N] [--share]
    python app.py --replicas N|MIN-MAX [--ray-address ADDR]   # Ray Serve replicas of the model
"""

from dg.ui.app import main

if __name__ == "__main__":
    main()
