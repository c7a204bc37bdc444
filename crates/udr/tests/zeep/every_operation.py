"""Drives every SOAP operation of the UDR through Python zeep in its default strict mode, given
only docs/udr.wsdl: SLF entries, EIR single IMEIs and IMEI ranges, policy profiles and Sh
profiles. Run by crates/udr/tests/soap_zeep.rs against a UDR on a real socket.

usage: every_operation.py WSDL ENDPOINT
Exit status 0 when every check holds; otherwise the failed check is printed and the status is 1.
"""

import sys

import zeep
from lxml import etree

WSDL, ENDPOINT = sys.argv[1], sys.argv[2]
BINDING = "{urn:fivecore:udr:provisioning:1}UdrProvisioningSoapBinding"
NS = "urn:fivecore:udr:provisioning:1"

client = zeep.Client(WSDL, settings=zeep.Settings(strict=True))
assert client.settings.strict
svc = client.create_service(BINDING, ENDPOINT)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def fault_code(call):
    """The udr:error code of the fault `call` raises."""
    try:
        call()
    except zeep.exceptions.Fault as f:
        code = f.detail.find(f"{{{NS}}}error/{{{NS}}}code")
        check(code is not None, f"fault without udr:error detail: {f.message}")
        return code.text
    raise AssertionError("no fault")


def slf():
    entry = {
        "subscriberId": ["imsi-001010000000011", "msisdn-33600000011"],
        "group": [{"nfType": "UDM", "groupId": "udm-1"}, {"nfType": "PCF", "groupId": "pcf-1"}],
    }
    created = svc.CreateSlfEntry(entry=entry)
    check([e.subscriberId for e in created] == [["imsi-001010000000011"], ["msisdn-33600000011"]],
          f"CreateSlfEntry answered {created}")
    got = svc.GetSlfEntry(subscriberId=["msisdn-33600000011"])
    check(len(got) == 1, f"GetSlfEntry answered {got}")
    groups = {(g.nfType, g.groupId) for g in got[0].group}
    check(groups == {("UDM", "udm-1"), ("PCF", "pcf-1")}, f"GetSlfEntry groups {groups}")
    entry["group"] = [{"nfType": "UDM", "groupId": "udm-2"}]
    updated = svc.UpdateSlfEntry(entry=entry)
    check(updated[0].group[0].groupId == "udm-2", f"UpdateSlfEntry answered {updated}")
    check(fault_code(lambda: svc.CreateSlfEntry(entry=entry)) == "ALREADY_EXISTS", "create twice")
    deleted = svc.DeleteSlfEntry(subscriberId=["imsi-001010000000011", "msisdn-33600000011"])
    check(deleted == 2, f"DeleteSlfEntry answered {deleted}")
    check(fault_code(lambda: svc.GetSlfEntry(subscriberId=["imsi-001010000000011"]))
          == "NOT_FOUND", "get after delete")


def eir_single():
    entry = {"imei": "35209900176148", "status": "BLACKLISTED",
             "supi": ["imsi-001010000000001"], "gpsi": ["msisdn-33600000001"]}
    created = svc.CreateEirEntry(entry=entry)
    check(created.imei == "35209900176148" and created.status == "BLACKLISTED"
          and created.supi == ["imsi-001010000000001"] and created.end is None,
          f"CreateEirEntry answered {created}")
    got = svc.GetEirEntry(imei="35209900176148")
    check(got.status == "BLACKLISTED" and got.gpsi == ["msisdn-33600000001"],
          f"GetEirEntry answered {got}")
    updated = svc.UpdateEirEntry(entry={"imei": "35209900176148", "status": "GREYLISTED"})
    check(updated.status == "GREYLISTED" and updated.supi == [], f"UpdateEirEntry answered {updated}")
    check(fault_code(lambda: svc.CreateEirEntry(entry=entry)) == "ALREADY_EXISTS", "create twice")
    check(svc.DeleteEirEntry(imei="35209900176148") is None, "DeleteEirEntry answers nothing")
    check(fault_code(lambda: svc.GetEirEntry(imei="35209900176148")) == "NOT_FOUND",
          "get after delete")


def eir_range():
    entry = {"start": "35209900000000", "end": "35209900000999", "status": "GREYLISTED"}
    created = svc.CreateEirEntry(entry=entry)
    check(created.start == "35209900000000" and created.end == "35209900000999"
          and created.imei is None, f"CreateEirEntry (range) answered {created}")
    got = svc.GetEirEntry(start="35209900000000")
    check(got.end == "35209900000999" and got.status == "GREYLISTED", f"GetEirEntry {got}")
    entry.update(end="35209900001999", status="BLACKLISTED")
    updated = svc.UpdateEirEntry(entry=entry)
    check(updated.end == "35209900001999" and updated.status == "BLACKLISTED",
          f"UpdateEirEntry (range) answered {updated}")
    check(svc.DeleteEirEntry(start="35209900000000") is None, "DeleteEirEntry (range)")
    check(fault_code(lambda: svc.GetEirEntry(start="35209900000000")) == "NOT_FOUND",
          "get range after delete")


def policy():
    ue = "imsi-001010000000021"
    created = svc.CreatePolicyProfile(ueId=ue, profile={"amData": '{"subscCats":["gold"]}'})
    check(created.ueId == ue and created.profile.amData == '{"subscCats":["gold"]}',
          f"CreatePolicyProfile answered {created}")
    got = svc.GetPolicyProfile(ueId=ue)
    check(got.profile.amData == '{"subscCats":["gold"]}' and got.profile.smData is None,
          f"GetPolicyProfile answered {got}")
    updated = svc.UpdatePolicyProfile(
        ueId=ue, profile={"umData": '{"u1":{"limitId":"u1"}}'})
    check(updated.profile.amData is None and updated.profile.umData is not None,
          f"UpdatePolicyProfile answered {updated}")
    check(svc.DeletePolicyProfile(ueId=ue) is None, "DeletePolicyProfile answers nothing")
    check(fault_code(lambda: svc.GetPolicyProfile(ueId=ue)) == "NOT_FOUND", "get after delete")


def sh():
    data = etree.fromstring('<Sh-Data xmlns="urn:example:mmtel"><on>1</on></Sh-Data>')
    profile = {
        "publicIdentity": ["sip:alice@ims.example", "tel:+33600000031"],
        "msisdn": ["33600000031"],
        "imsUserState": "REGISTERED",
        "scscfName": "sip:scscf1.ims.example",
        "repositoryData": [{"serviceIndication": "mmtel", "serviceData": {"_value_1": [data]}}],
    }
    created = svc.CreateShProfile(profile=profile)
    check(created.publicIdentity == ["sip:alice@ims.example", "tel:+33600000031"]
          and created.imsUserState == "REGISTERED"
          and created.repositoryData[0].sequenceNumber == 0,
          f"CreateShProfile answered {created}")
    got = svc.GetShProfile(msisdn="33600000031")
    check(got.scscfName == "sip:scscf1.ims.example", f"GetShProfile answered {got}")
    kept = got.repositoryData[0].serviceData._value_1
    check(any(getattr(x, "tag", None) == "{urn:example:mmtel}Sh-Data" for x in kept),
          f"ServiceData kept verbatim: {kept}")
    profile["imsUserState"] = "NOT_REGISTERED"
    updated = svc.UpdateShProfile(publicIdentity="sip:alice@ims.example", profile=profile)
    check(updated.imsUserState == "NOT_REGISTERED"
          and updated.repositoryData[0].sequenceNumber == 0,
          f"UpdateShProfile answered {updated}")
    check(svc.DeleteShProfile(publicIdentity="sip:alice@ims.example") is None, "DeleteShProfile")
    check(fault_code(lambda: svc.GetShProfile(msisdn="33600000031")) == "NOT_FOUND",
          "get after delete")


for family in (slf, eir_single, eir_range, policy, sh):
    try:
        family()
    except Exception as e:  # noqa: BLE001 - report which family failed and why
        print(f"{family.__name__}: {type(e).__name__}: {e}")
        sys.exit(1)
    print(f"{family.__name__}: ok")
