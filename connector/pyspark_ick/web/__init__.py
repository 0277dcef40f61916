"""The operator's console, ``pyspark-ick web`` (docs/console.md): the Icks, dead letters
and dehydrators of a Redis in a browser, with plots of the last hour, and re-drive or
purge of dead letters when started with actions allowed. Needs the ``web`` extra (Flask,
waitress). It reads and changes Redis only through the library's operations (observe,
dead_letters, dehydrator_view, numbered logs), in bounded calls.
"""
