"""dpcore: differentially private releases of location data.

The library behind the Streamlit app and the ``python -m dpcore`` command line.
It never imports streamlit.
"""

__version__ = "0.1.0"
