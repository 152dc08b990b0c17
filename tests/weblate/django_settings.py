"""The least Django configuration under which Weblate's machinery classes import and run
(machinery_check.py): Weblate's own apps and the ones their models need, an in-memory
database that nothing queries, and a local-memory cache (Weblate caches each service's
languages there). Weblate's quality checks are off: the machinery never runs them, and the
font-rendering check would need a font configuration."""

SECRET_KEY = "weblate-machinery-check"  # noqa: S105 (a throwaway process, no sessions)
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes", "django.contrib.auth", "django.contrib.sessions",
    "django.contrib.messages", "django_otp", "django_otp.plugins.otp_static",
    "django_otp.plugins.otp_totp", "django_otp_webauthn", "social_django",
    "weblate.auth", "weblate.checks", "weblate.formats", "weblate.glossary",
    "weblate.machinery", "weblate.trans", "weblate.lang", "weblate_language_data",
    "weblate.memory", "weblate.accounts", "weblate.configuration", "weblate.utils",
    "weblate.vcs", "weblate.metrics", "weblate",
]
AUTH_USER_MODEL = "weblate_auth.User"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
SITE_DOMAIN = "localhost"
SITE_URL = "http://localhost"
CHECK_LIST: list[str] = []
AUTOFIX_LIST: list[str] = []
