from django import forms

from portal.apitokens.services.tokens import MAX_EXPIRY_DAYS


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'laptop CLI'")
    expires_in_days = forms.IntegerField(min_value=1, max_value=MAX_EXPIRY_DAYS, initial=90, label="Expires in (days)")
