"""Input of the release pages; the policy itself is checked by ``validation.check_policy``."""

from __future__ import annotations

from django import forms
from django.contrib.auth.models import User


class ProposeForm(forms.Form):
    content = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 30, "cols": 100, "spellcheck": "false"}),
        strip=False,
        label="Policy (YAML)",
    )
    owner: forms.ModelChoiceField[User] = forms.ModelChoiceField(
        queryset=None, empty_label="(choose the owner who approves)", help_text="A platform operator other than you"
    )
    summary = forms.CharField(max_length=300, required=False, help_text="What changes and why")

    def __init__(self, *args, user: User, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        owner = self.fields["owner"]
        if isinstance(owner, forms.ModelChoiceField):  # (declared above: always)
            owner.queryset = User.objects.filter(is_staff=True, is_active=True).exclude(pk=user.pk).order_by("username")
